/**
 * Waiting for a slow reader of a long answer (the event stream, a streamed export) without
 * buffering for it.
 */
import type { Response } from 'express';

/**
 * Whether the socket drained within `ms`. A response whose client is gone answers false at
 * once: its 'close' has been emitted already and would never come again, so the stream (and
 * its lease among the token's streams) would otherwise stay until `ms` ran out.
 */
export function drained(res: Response, ms: number): Promise<boolean> {
  if (res.destroyed) return Promise.resolve(false);
  return new Promise((resolve) => {
    const done = (ok: boolean) => {
      clearTimeout(timer);
      res.off('drain', onDrain);
      res.off('close', onClose);
      resolve(ok);
    };
    const onDrain = () => done(true);
    const onClose = () => done(false);
    const timer = setTimeout(() => done(false), ms);
    res.on('drain', onDrain);
    res.on('close', onClose);
  });
}
