/** `npm run openapi`: rewrites openapi.json at the repository root from the router. */
import { writeFileSync } from 'node:fs';
import { buildOpenApiDocument, serializeOpenApiDocument } from './document.js';

const target = new URL('../../openapi.json', import.meta.url);
writeFileSync(target, serializeOpenApiDocument(buildOpenApiDocument()));
console.log(`wrote ${target.pathname}`);
