// The page's only way to the server: JSON in, JSON out; a 4xx/5xx becomes an Error with the field it names.

export class ApiError extends Error {
  constructor(message, field, status) {
    super(message);
    this.field = field;
    this.status = status;
  }
}

export async function api(path, body) {
  const request = body === undefined
    ? { headers: { accept: "application/json" } }
    : { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) };
  let response;
  try {
    response = await fetch(path, request);
  } catch (error) {
    throw new ApiError(`the trainrig server cannot be reached (${error.message}); is \`trainrig serve\` running?`, null, 0);
  }
  const data = await response.json().catch(() => null);
  if (!response.ok) {
    const message = data && data.message ? data.message : `the server answered ${response.status}`;
    throw new ApiError(message, data ? data.field : null, response.status);
  }
  return data;
}
