/**
 * Requests and procedure runs that are not over yet. A client that disconnects closes its
 * connection, so the HTTP server may report itself closed while the handler of that request
 * still talks to the database; a stop waits for `settled()` before it closes the ORM.
 * A request counts until its response is ended (`wrap`), a procedure until it has returned
 * or failed (`enter`), whether or not its client is still there.
 */
import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';

export class InFlight {
  private count = 0;
  private waiters: Array<() => void> = [];

  /** Requests not yet answered plus procedures still running. */
  get size(): number {
    return this.count;
  }

  /**
   * Counts one procedure run until `leave` is called. A tRPC batch streamed as JSON lines
   * ends its response when its client hangs up, while its procedures still run: they are
   * counted here, by a middleware that every procedure passes (src/core/trpc.ts).
   */
  enter(): () => void {
    this.count += 1;
    let left = false;
    return () => {
      if (left) return;
      left = true;
      this.release();
    };
  }

  private release(): void {
    this.count -= 1;
    if (this.count === 0) for (const wake of this.waiters.splice(0)) wake();
  }

  /** `listener`, counting each request until its response is ended. */
  wrap(listener: RequestListener): RequestListener {
    return (req: IncomingMessage, res: ServerResponse) => {
      const leave = this.enter();
      const end = res.end;
      res.end = ((...args: Parameters<typeof res.end>) => {
        leave();
        return end.apply(res, args);
      }) as typeof res.end;
      listener(req, res);
    };
  }

  /** Resolves once no handler runs, or after `timeoutMs`; true when all settled. */
  settled(timeoutMs: number): Promise<boolean> {
    if (this.count === 0) return Promise.resolve(true);
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== wake);
        resolve(false);
      }, timeoutMs);
      timer.unref();
      const wake = () => {
        clearTimeout(timer);
        resolve(true);
      };
      this.waiters.push(wake);
    });
  }
}
