"""`trainrig serve`: a web page and a JSON API over the same functions as the CLI.

FastAPI and uvicorn are imported only here (the `web` extra: `pip install 'trainrig[web]'`), so
`import trainrig` stays light. `create_app(settings)` builds the app; `trainrig.web.app` holds it.
"""
