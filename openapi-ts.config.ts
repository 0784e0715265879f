/**
 * `npm run client`: generates the REST client in clients/rest/ from openapi.json with
 * @hey-api/openapi-ts (fetch client, types, one SDK function per operation). The folder is
 * generated code, committed; test/rest-client.test.ts checks it is what this config gives.
 *
 * The bundled fetch client names the DOM type `BodyInit`, which this repository's tsconfig
 * (lib ES2024, Node types, no DOM) lacks. A post-processor rewrites it to the equivalent
 * `NonNullable<RequestInit['body']>` (RequestInit is global in @types/node), so the generated
 * code compiles under the strict tsconfig without excluding it or adding the DOM lib.
 */
import { defineConfig } from '@hey-api/openapi-ts';

/** Run as `node -e <script> <folder>`: replaces `BodyInit` in every generated .ts file. */
const REPLACE_BODY_INIT = `
const fs = require('node:fs');
const path = require('node:path');
const walk = (dir) => fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
  e.isDirectory() ? walk(path.join(dir, e.name)) : e.name.endsWith('.ts') ? [path.join(dir, e.name)] : []);
for (const file of walk(process.argv[1])) {
  const text = fs.readFileSync(file, 'utf8');
  const fixed = text.replace(/\\bBodyInit\\b/g, "NonNullable<RequestInit['body']>");
  if (fixed !== text) fs.writeFileSync(file, fixed);
}
`;

export const REST_CLIENT_OUTPUT = './clients/rest';

export default defineConfig({
  input: './openapi.json',
  output: {
    path: REST_CLIENT_OUTPUT,
    tsConfigPath: './tsconfig.json',
    // NodeNext resolution: relative imports need explicit .js extensions.
    module: { extension: '.js' },
    postProcess: [{ name: 'BodyInit for Node types', command: process.execPath, args: ['-e', REPLACE_BODY_INIT, '{{path}}'] }],
  },
  plugins: ['@hey-api/client-fetch', '@hey-api/typescript', '@hey-api/sdk'],
});
