/**
 * Configuration for the MikroORM CLI (`npx mikro-orm ...`). Point DATABASE_URL at the
 * PostgreSQL to work on; the service itself builds the same configuration in src/app/orm.ts.
 */
import { ormConfig } from './src/app/orm.js';

export default ormConfig({
  clientUrl: process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/planning',
});
