/**
 * An answer the REST door writes as it is produced, instead of a value it serialises whole:
 * the account's export (API-CONTRACT.md §16), whose size has no bound. A procedure returns
 * one only on the REST door (`ctx.door === 'rest'`); tRPC's own adapters serialise whatever a
 * procedure returns in one piece, so on /trpc the same procedure answers the whole value.
 *
 * The REST door (src/http/rest.ts) reads the first chunk before it sends the status, so a
 * failure there (the database gone) is still an error envelope; it then writes chunk after
 * chunk, waiting for the socket to drain, and ends the body (calling `return()` on the
 * iterator, which releases what it holds) when the client goes away or stops reading.
 */
export class StreamedAnswer {
  constructor(
    /** The `Content-Type` of the body. */
    readonly contentType: string,
    /** Further headers of the answer (`Content-Disposition`). */
    readonly headers: Readonly<Record<string, string>>,
    /** The body, in chunks of text. */
    readonly body: AsyncIterable<string>,
  ) {}
}
