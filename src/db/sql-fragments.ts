/** SQL pieces the stores share. */

/** A timestamp column as whole Unix seconds, 0 when unset, read by pg as a JS number. */
export const secondsOf = (column: string) => `coalesce(floor(extract(epoch from ${column})), 0)::float8`;

/** Ids as one PostgreSQL array literal: MikroORM would expand a JS array into a list of parameters. */
export const idArray = (ids: readonly number[]) => `{${ids.map((id) => Math.trunc(id)).join(',')}}`;
