-- The per-key rollups' durations as a dense histogram: duration_counts[b]
-- counts the requests of duration bucket b (the bucket of migration 13:
-- 0.1 ms x 2^(b/4), 0..63), merged with sumForEach.
--
-- Why: an operator's usage grouped by key reads these rollups over every
-- account (about 2,000 rows a day over 10 million requests of 1,000
-- accounts). ClickHouse 18.16 reads a sumMap state value by value: reading
-- a month of the durations column alone took about 200 ms, where the dense
-- arrays are read and summed element-wise in about a tenth of that
-- (bench/results.md, "The API as a product"). The per-account and global
-- rollups keep their sumMap: their reads cover few rows.
--
-- Rows written before this migration keep their histogram in durations
-- (duration_counts empty); rows written after it have an empty durations
-- (18.16 wants every column of the target from a view) and a filled
-- duration_counts. Readers merge both.
--
-- The new views are created before the old ones are dropped, so no request
-- misses the rollups while the views change; a batch of requests inserted
-- in that instant is counted twice by them.
ALTER TABLE api_usage_key_hours ADD COLUMN duration_counts AggregateFunction(sumForEach, Array(UInt64));

ALTER TABLE api_usage_key_days ADD COLUMN duration_counts AggregateFunction(sumForEach, Array(UInt64));

CREATE MATERIALIZED VIEW IF NOT EXISTS api_usage_key_hours_dense_mv TO api_usage_key_hours AS
SELECT toUInt32(intDiv(at, 3600000) * 3600) AS bucket, account_id, key_id,
       countState() AS requests, sumState(toUInt64(status < 400)) AS succeeded,
       sumState(toUInt64(status >= 400 AND status < 500)) AS invalid, sumState(toUInt64(compute_units)) AS units,
       sumState(toUInt64(if(status >= 400 AND status < 500, compute_units, 0))) AS wasted_units,
       sumMapState(emptyArrayUInt8(), emptyArrayUInt64()) AS durations,
       sumForEachState(arrayResize(arrayResize(emptyArrayUInt64(), toUInt8(least(63, greatest(0, floor(4 * log2(duration_us / 100)))))),
           toUInt8(least(63, greatest(0, floor(4 * log2(duration_us / 100))))) + 1, toUInt64(1))) AS duration_counts
FROM api_requests
GROUP BY bucket, account_id, key_id;

CREATE MATERIALIZED VIEW IF NOT EXISTS api_usage_key_days_dense_mv TO api_usage_key_days AS
SELECT toUInt32(intDiv(at, 86400000) * 86400) AS bucket, account_id, key_id,
       countState() AS requests, sumState(toUInt64(status < 400)) AS succeeded,
       sumState(toUInt64(status >= 400 AND status < 500)) AS invalid, sumState(toUInt64(compute_units)) AS units,
       sumState(toUInt64(if(status >= 400 AND status < 500, compute_units, 0))) AS wasted_units,
       sumMapState(emptyArrayUInt8(), emptyArrayUInt64()) AS durations,
       sumForEachState(arrayResize(arrayResize(emptyArrayUInt64(), toUInt8(least(63, greatest(0, floor(4 * log2(duration_us / 100)))))),
           toUInt8(least(63, greatest(0, floor(4 * log2(duration_us / 100))))) + 1, toUInt64(1))) AS duration_counts
FROM api_requests
GROUP BY bucket, account_id, key_id;

DROP TABLE IF EXISTS api_usage_key_hours_mv;

DROP TABLE IF EXISTS api_usage_key_days_mv
