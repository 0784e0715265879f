/** JSON requests against a base URL (the test app's and services run as processes), and raw ones. */
import { request as httpRequest } from 'node:http';
import net from 'node:net';
/** An answer: its status and headers, its text, and that text parsed as JSON (undefined if it is not JSON). */
export interface ApiResponse<T = any> {
  status: number;
  headers: Headers;
  body: T;
  text: string;
}

export interface RequestOptions {
  token?: string;
  body?: unknown;
  /** Sent as is, instead of JSON.stringify(body); bytes get no Content-Type unless given. */
  rawBody?: string | Uint8Array;
  headers?: Record<string, string>;
}

/** The one JSON request of the tests (fetch): a token, a body as JSON or as raw text, extra headers. */
export async function request<T = any>(baseUrl: string, method: string, path: string, options: RequestOptions = {}): Promise<ApiResponse<T>> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.token) headers.Authorization = options.token;
  let body: string | Uint8Array | undefined = options.rawBody;
  if (body === undefined && options.body !== undefined) {
    body = JSON.stringify(options.body);
    headers['Content-Type'] ??= 'application/json';
  }
  const response = await fetch(baseUrl + path, { method, headers, body });
  const text = await response.text();
  let parsed: unknown = undefined;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = undefined;
  }
  return { status: response.status, headers: response.headers, body: parsed as T, text };
}

/** `request` with its options as positional arguments, for services started as processes. */
export function call(baseUrl: string, method: string, path: string, options: { token?: string; body?: unknown } = {}): Promise<ApiResponse> {
  return request(baseUrl, method, path, options);
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

/** An answer read off a raw socket: the status of its first status line (a 100 Continue, if one came), its head, its headers (names in lower case), its body (de-chunked). */
export interface RawAnswer {
  status: number;
  head: string;
  headers: Record<string, string>;
  text: string;
  /** Everything the server wrote, as text: several answers, when several requests were sent. */
  raw: string;
}

/**
 * Writes `bytes` as they are on a connection of its own to `baseUrl`'s port (node:net: no
 * client library to fix the request first) and reads the whole answer, once the server ends
 * the connection (send `Connection: close`, or bytes the server refuses). Several buffers are
 * written one after another, each once the server has had 30 ms to read the one before;
 * `halfClose` then ends the client's side, as `nc -N` does, and reads on.
 */
export function rawExchange(baseUrl: string, bytes: Buffer | Buffer[], options: { halfClose?: boolean } = {}): Promise<RawAnswer> {
  const { port } = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), '127.0.0.1');
    const chunks: Buffer[] = [];
    socket.on('data', (chunk) => chunks.push(chunk));
    socket.on('error', reject);
    socket.on('end', () => {
      const answer = Buffer.concat(chunks).toString('utf8');
      const at = answer.indexOf('\r\n\r\n');
      const head = answer.slice(0, at);
      const headers: Record<string, string> = {};
      for (const line of head.split('\r\n').slice(1)) {
        const colon = line.indexOf(':');
        headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim();
      }
      let text = answer.slice(at + 4);
      if (headers['transfer-encoding'] === 'chunked') text = dechunk(text);
      resolve({ status: Number(/^HTTP\/1\.[01] (\d{3})/.exec(head)?.[1]), head, headers, text, raw: answer });
    });
    void (async () => {
      for (const [i, part] of (Array.isArray(bytes) ? bytes : [bytes]).entries()) {
        if (i > 0) await new Promise((resolve) => setTimeout(resolve, 30));
        if (!socket.destroyed) socket.write(part);
      }
      if (options.halfClose && !socket.destroyed) socket.end();
    })();
  });
}

function dechunk(text: string): string {
  let out = '';
  for (let rest = text; rest.length > 0; ) {
    const lineEnd = rest.indexOf('\r\n');
    const size = Number.parseInt(rest.slice(0, lineEnd), 16);
    if (!size) break;
    out += rest.slice(lineEnd + 2, lineEnd + 2 + size);
    rest = rest.slice(lineEnd + 2 + size + 2);
  }
  return out;
}
