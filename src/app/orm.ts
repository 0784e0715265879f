/**
 * The ORM of this service: its entities, listed here at the composition root so that the
 * database layer (src/db/) imports no feature. The service, the tests, the benches and the
 * MikroORM CLI (mikro-orm.config.ts) all open it through this file.
 */
import type { MikroORM, Options } from '@mikro-orm/postgresql';
import { openOrm as openOrmWith, type Installer, type OpenOrmOptions } from '../db/database.js';
import { ormConfig as ormConfigWith, type OrmSettings } from '../db/orm-config.js';
import { AccessToken } from '../users/access-token.entity.js';
import { User } from '../users/user.entity.js';
import { Project } from '../projects/project.entity.js';
import { Task } from '../tasks/task.entity.js';
import { installWriteFunctions } from '../writes/write-functions.js';
import { writeFunctionSet } from './write-functions.js';

export const entities = [User, AccessToken, Project, Task];

export function ormConfig(settings: Omit<OrmSettings, 'entities'>): Options {
  return ormConfigWith({ ...settings, entities });
}

/** Installs this code's write functions, unless installed (run under the migration lock). */
export const installWrites: Installer = (run) => installWriteFunctions(run, writeFunctionSet);

export function openOrm(clientUrl: string, options: Omit<OpenOrmOptions, 'entities' | 'install'>): Promise<MikroORM> {
  return openOrmWith(clientUrl, { ...options, entities, install: installWrites });
}
