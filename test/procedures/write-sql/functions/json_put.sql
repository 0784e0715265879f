-- json_put

create function w.json_put(p_object json, p_path text[], p_value json) returns json language plpgsql immutable as $$
begin
  if cardinality(p_path) = 0 then
    return p_value;
  end if;
  return
    (
      select
        json_object_agg(
          e.key,
          case
            when e.key = p_path[1] then w.json_put (e.value, p_path[2:], p_value)
            else e.value
          end
          order by
            e.n
        )
      from
        json_each(p_object) with ordinality as e (key, value, n)
    );
end
$$
