/** Single HTTP requests with a token, outside autocannon: for checks, idle latency and writes whose answers are read. */
import http from 'node:http';
import type { BenchRequest } from './load.js';

/**
 * One request; resolves with its status and body text. `host` sets the Host header (fetch
 * cannot), for byte-for-byte comparisons of answers that contain links; `agent` keeps
 * connections alive across calls.
 */
export function request(
  base: string,
  method: string,
  pathname: string,
  token: string,
  body?: unknown,
  options: { host?: string; agent?: http.Agent } = {},
): Promise<{ status: number; text: string }> {
  const url = new URL(base);
  const payload = body === undefined ? undefined : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: url.hostname,
        port: url.port,
        method,
        path: pathname,
        agent: options.agent,
        headers: {
          ...(options.host === undefined ? {} : { host: options.host }),
          authorization: token,
          ...(payload === undefined ? {} : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) }),
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

/** One request on a keep-alive agent; resolves with the status once the body is read (and dropped). */
export function statusOf(base: string, r: BenchRequest, agent: http.Agent): Promise<number> {
  const url = new URL(base);
  const payload = r.body === undefined ? undefined : JSON.stringify(r.body);
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: url.hostname,
        port: url.port,
        method: r.method,
        path: r.path,
        agent,
        headers: {
          authorization: r.token,
          ...(payload === undefined ? {} : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) }),
        },
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}
