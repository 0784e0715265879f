/**
 * The direction of src/ (ENGINEERING.md "A layout that shows it"): each layer may import the
 * layers below it, never one above it, and no import circle may form anywhere. Run by
 * test/rules/dependency-direction.test.ts inside `npm test`, and by hand with
 * `npx depcruise src`.
 */

/** From the bottom up; files of one entry are one layer, and the files of a list entry may not import each other. */
export const LAYERS = [
  { name: 'config', paths: ['^src/config\\.ts$'] },
  { name: 'core', paths: ['^src/core/'] }, // vocabulary: context, errors, clock, limits, resources, tRPC's procedures
  { name: 'db', paths: ['^src/db/'] }, // connections, statements, migrations
  { name: 'writes', paths: ['^src/writes/'] }, // the one write path: owner lock, turns, idempotency, If-Match, event append
  { name: 'users', paths: ['^src/users/'] },
  { name: 'tasks', paths: ['^src/tasks/'] },
  { name: 'projects', paths: ['^src/projects/'] },
  { name: 'batch', paths: ['^src/batch/'] }, // several writes in one: composes the use cases of tasks and projects
  // The change log's two consumers, side by side: feeds and streams; webhooks (management, delivery).
  [
    { name: 'changes', paths: ['^src/changes/'] },
    { name: 'webhooks', paths: ['^src/webhooks/'] },
  ],
  { name: 'app', paths: ['^src/app/'] }, // the composition root: router, ORM entities, resource readers
  [
    { name: 'client', paths: ['^src/client\\.ts$'] },
    { name: 'openapi', paths: ['^src/openapi/'] },
    { name: 'metrics', paths: ['^src/metrics/'] },
  ],
  { name: 'http', paths: ['^src/http/'] },
  { name: 'server', paths: ['^src/server\\.ts$'] },
  [
    { name: 'main', paths: ['^src/main\\.ts$'] },
    { name: 'migrate-cli', paths: ['^src/migrate-cli\\.ts$'] },
    { name: 'citus-distribute-cli', paths: ['^src/citus-distribute-cli\\.ts$'] },
  ],
];

const ranks = LAYERS.map((entry) => (Array.isArray(entry) ? entry : [entry]));
const pathsOf = (layers) => layers.flatMap((layer) => layer.paths);

const upward = ranks.flatMap((rank, i) => {
  const above = pathsOf(ranks.slice(i + 1).flat());
  return above.length === 0
    ? []
    : rank.map((layer) => ({
        name: `${layer.name}-imports-no-layer-above`,
        comment: `${layer.name} sits below ${ranks.slice(i + 1).flat().map((l) => l.name).join(', ')}: what both need moves down.`,
        severity: 'error',
        from: { path: layer.paths },
        to: { path: above },
      }));
});

const sideways = ranks.flatMap((rank) =>
  rank.length < 2
    ? []
    : rank.map((layer) => ({
        name: `${layer.name}-imports-no-sibling`,
        comment: `${layer.name} and ${rank.filter((l) => l !== layer).map((l) => l.name).join(', ')} stand side by side.`,
        severity: 'error',
        from: { path: layer.paths },
        to: { path: pathsOf(rank.filter((l) => l !== layer)) },
      })),
);

/** @type {import('dependency-cruiser').IConfiguration} */
export default {
  forbidden: [
    ...upward,
    ...sideways,
    {
      name: 'no-circular',
      comment: 'An import circle, inside a folder or across folders.',
      severity: 'error',
      from: { path: '^src/' },
      to: { circular: true },
    },
    {
      name: 'every-file-in-a-layer',
      comment: 'A file of src/ outside every layer would escape the direction: give it one in LAYERS.',
      severity: 'error',
      from: { path: '^src/', pathNot: pathsOf(ranks.flat()) },
      to: {},
    },
    {
      name: 'not-to-unresolvable',
      comment: 'An import that resolves to nothing.',
      severity: 'error',
      from: { path: '^src/' },
      to: { couldNotResolve: true },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    includeOnly: '^src/',
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
  },
};
