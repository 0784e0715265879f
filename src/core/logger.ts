/** Structured JSON logs (pino). Authorization headers and tokens are never logged. */
import { pino, type Logger } from 'pino';

export type { Logger };

export function createLogger(level: string): Logger {
  return pino({
    level,
    base: { pid: process.pid },
    redact: { paths: ['req.headers.authorization', 'authorization', 'token', '*.token', 'password', '*.password'], remove: true },
  });
}
