/**
 * The operation the metrics label a REST request with (src/metrics/service-metrics.ts) is the
 * route the REST door matched it to (src/http/rest.ts), read from the request: each request is
 * matched against the routes once. Only a request refused before it reached the door (a bad
 * Host, a transfer coding) is matched by the metrics, once, so that its label stays what it
 * was. test/http/metrics.test.ts checks the labels of a running service.
 */
import type { Request } from 'express';
import { describe, expect, it } from 'vitest';
import { appRouter } from '../../src/app/router.js';
import { noteRestMatch, restRoutes } from '../../src/core/rest-routes.js';
import { operationOf } from '../../src/metrics/service-metrics.js';

const routeOf = restRoutes(appRouter);
const request = (method: string, url: string) => ({ method, url, originalUrl: url, headers: {} }) as unknown as Request;

describe('the operation label of a REST request', () => {
  it('is the route the door noted on the request, not a match of its own', () => {
    const req = request('GET', '/api/users/me');
    // Noted as another route: the label can only come from the note.
    noteRestMatch(req, routeOf('GET', '/api/tasks/1'));
    expect(operationOf(req)).toBe('tasks.get');
  });

  it('is unmatched when the door noted that no route matched', () => {
    const req = request('GET', '/api/users/me');
    noteRestMatch(req, undefined);
    expect(operationOf(req)).toBe('unmatched');
  });

  it('is matched by the metrics for a request that never reached the door', () => {
    expect(operationOf(request('GET', '/api/users/me'))).toBe('users.me');
    expect(operationOf(request('DELETE', '/api/users/me/nothing'))).toBe('unmatched');
  });
});
