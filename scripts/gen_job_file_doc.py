"""Write docs/job-file.md from the specs' field docstrings: `python scripts/gen_job_file_doc.py`."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Document this checkout's specs even when another copy of trainrig is installed.
sys.path.insert(0, str(ROOT / "src"))

from trainrig.specs.reference import job_file_reference_markdown  # noqa: E402

if __name__ == "__main__":
    target = ROOT / "docs" / "job-file.md"
    target.write_text(job_file_reference_markdown())
    print(f"wrote {target.relative_to(ROOT)}")
