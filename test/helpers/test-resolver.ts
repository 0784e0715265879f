/**
 * Host names for webhook tests, resolved without a network: the machines that run the tests
 * have none. Names under `example.com` (and it) resolve to a public address; names under
 * `private.test` to private ones, as a name an attacker controls might; `flip.test` to a
 * public address at first and to the loopback afterwards (DNS rebinding: `flips()` arms it).
 * Any other name does not resolve (ENOTFOUND), as an unknown name would.
 */
import type { ResolvedAddress } from '../../src/webhooks/address-guard.js';

export const PUBLIC_ADDRESS = '93.184.215.14';

const PRIVATE: Record<string, ResolvedAddress[]> = {
  'loopback.private.test': [{ address: '127.0.0.1', family: 4 }],
  'metadata.private.test': [{ address: '169.254.169.254', family: 4 }],
  'ten.private.test': [{ address: '10.1.2.3', family: 4 }],
  'v6.private.test': [{ address: '::1', family: 6 }],
  'mixed.private.test': [{ address: PUBLIC_ADDRESS, family: 4 }, { address: '192.168.1.1', family: 4 }],
};

export interface TestResolver {
  (hostname: string): Promise<ResolvedAddress[]>;
  /** After this, `flip.test` resolves to 127.0.0.1. */
  flip(): void;
}

export function testResolver(): TestResolver {
  let flipped = false;
  const resolve = (async (hostname: string) => {
    const name = hostname.toLowerCase().replace(/\.$/, '');
    if (name === 'example.com' || name.endsWith('.example.com')) return [{ address: PUBLIC_ADDRESS, family: 4 }];
    if (name === 'flip.test') return [{ address: flipped ? '127.0.0.1' : PUBLIC_ADDRESS, family: 4 }];
    const fixed = PRIVATE[name];
    if (fixed) return fixed;
    throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
  }) as TestResolver;
  resolve.flip = () => {
    flipped = true;
  };
  return resolve;
}
