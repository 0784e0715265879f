/**
 * An event stream of the service read for timing: `GET /api/users/me/events` with `token`,
 * each event's `data` line handed to `onData` with the moment its chunk arrived
 * (`performance.now()`, before any parsing). Resolves once the stream is open (200), with a
 * function that closes it; rejects on any other status.
 */
import http from 'node:http';

export function followEvents(base: string, token: string, onData: (data: string, receivedAt: number) => void): Promise<() => void> {
  return new Promise((resolve, reject) => {
    const req = http.get(`${base}/api/users/me/events`, { headers: { Authorization: token, Accept: 'text/event-stream' } }, (res) => {
      if (res.statusCode !== 200) {
        reject(new Error(`stream answered ${res.statusCode}`));
        return;
      }
      res.setEncoding('utf8');
      let buffer = '';
      res.on('data', (chunk: string) => {
        const now = performance.now();
        buffer += chunk;
        let cut: number;
        while ((cut = buffer.indexOf('\n\n')) >= 0) {
          const block = buffer.slice(0, cut);
          buffer = buffer.slice(cut + 2);
          const data = /^data: (.*)$/m.exec(block)?.[1];
          if (data) onData(data, now);
        }
      });
      resolve(() => req.destroy());
    });
    req.on('error', reject);
  });
}
