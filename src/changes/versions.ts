/**
 * The current ETag of one of a user's projects or tasks, read inside a write (under the
 * owner's lock) to check If-Match. One statement; only sent when If-Match is.
 */
import type { SqlEntityManager } from '@mikro-orm/postgresql';
import { projectEtag, taskEtag } from '../core/conditional.js';
import type { Resource } from './user-write.js';

export async function currentEtag(em: SqlEntityManager, resource: Resource, userId: number, id: number): Promise<string | null> {
  if (!Number.isSafeInteger(id) || id < 1 || id > 2_147_483_647) return null;
  if (resource === 'task') {
    const [row] = await em.execute<Array<{ version: number }>>('select version from tasks where id = ? and user_id = ?', [id, userId]);
    return row ? taskEtag(id, row.version) : null;
  }
  const [row] = await em.execute<Array<{ version: number; task_ids: number[] }>>(
    `select p.version,
            array(select t.id from tasks t where t.project_id = p.id and t.state <> 'abandoned' order by t."order", t.id) as task_ids
       from projects p where p.id = ? and p.user_id = ?`,
    [id, userId],
  );
  return row ? projectEtag(id, row.version, row.task_ids) : null;
}
