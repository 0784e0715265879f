-- stream.lease-renew

update event_stream_leases set expires_at = ?::timestamptz where user_id = any(?::bigint[]) and id = any(?::uuid[]) returning id
