-- stream.lease-take

select
  take_event_stream_lease (?, ?::text, ?::uuid, ?::integer, ?::integer) as taken
