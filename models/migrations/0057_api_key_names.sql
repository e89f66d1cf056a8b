-- depends: 0056_archive_verify_claim
-- One name means one key (issue 35): key names are unique case-insensitively. A name shared today
-- keeps it on its oldest key; the others get their id's first 8 characters appended.
UPDATE api_keys k SET name = k.name || '-' || left(k.id::text, 8)
WHERE EXISTS (
    SELECT 1 FROM api_keys o
    WHERE lower(o.name) = lower(k.name) AND (o.created_at, o.id::text) < (k.created_at, k.id::text)
);
CREATE UNIQUE INDEX api_keys_name_ci ON api_keys (lower(name));
