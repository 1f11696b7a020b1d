-- Which migrations have run. Written after each migration succeeds.
CREATE TABLE IF NOT EXISTS schema_migrations (
    version UInt32,
    name String,
    applied_at DateTime
) ENGINE = ReplacingMergeTree(applied_at)
ORDER BY version
