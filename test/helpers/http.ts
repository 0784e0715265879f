/** Plain JSON requests against a base URL, for tests that run the service as a process. */
export interface JsonResponse {
  status: number;
  body: any;
  headers: Headers;
}

export async function call(baseUrl: string, method: string, path: string, options: { token?: string; body?: unknown } = {}): Promise<JsonResponse> {
  const headers: Record<string, string> = {};
  if (options.token) headers.Authorization = options.token;
  if (options.body !== undefined) headers['Content-Type'] = 'application/json';
  const res = await fetch(baseUrl + path, {
    method,
    headers,
    body: options.body === undefined ? undefined : JSON.stringify(options.body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined, headers: res.headers };
}

export async function registerUser(baseUrl: string, username: string): Promise<{ id: number; token: string }> {
  const res = await call(baseUrl, 'POST', '/api/users', { body: { user: { username, password: 'password1' } } });
  if (res.status !== 201) throw new Error(`register: ${res.status} ${JSON.stringify(res.body)}`);
  return { id: res.body.data.id, token: res.body.meta.token };
}
