/** Plain JSON requests against a base URL, for tests that run the service as a process; raw ones. */
import { request as httpRequest } from 'node:http';
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

export interface RawResponse {
  status: number;
  headers: Headers;
  text: string;
  body: any;
}

/**
 * A request with its body and headers exactly as given, through node:http, which (unlike
 * fetch) sends a body on a GET and sets no header of its own but Host and Connection.
 * A service that answers before it has read all of a big body (413) resets the upload; that
 * is not an error here.
 */
export function rawRequest(url: string | URL, method: string, headers: Record<string, string>, body: string | Buffer): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method, headers: { 'Content-Length': String(Buffer.byteLength(body)), ...headers } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => {
        const h = new Headers();
        for (const [k, v] of Object.entries(res.headers)) if (typeof v === 'string') h.set(k, v);
        resolve({ status: res.statusCode!, headers: h, text, body: text ? JSON.parse(text) : undefined });
      });
    });
    req.on('error', (error: NodeJS.ErrnoException) => (error.code === 'EPIPE' || error.code === 'ECONNRESET' ? undefined : reject(error)));
    req.end(body);
  });
}
