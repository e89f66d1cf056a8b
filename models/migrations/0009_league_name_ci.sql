-- depends: 0008_api_keys
-- League names are unique case-insensitively (NFL beside nfl would be two archive trees for one
-- feed league on a case-insensitive file system, and two leagues to an operator). Refuse to apply
-- while duplicates exist, naming them, so an operator merges them first.
DO $$
DECLARE
    dups TEXT;
BEGIN
    SELECT string_agg(names, '; ') INTO dups FROM (
        SELECT string_agg(name, ', ' ORDER BY name) AS names
        FROM leagues GROUP BY lower(name) HAVING count(*) > 1
    ) d;
    IF dups IS NOT NULL THEN
        RAISE EXCEPTION 'leagues differ only in case: %; rename or merge them, then migrate again', dups;
    END IF;
END
$$;
CREATE UNIQUE INDEX leagues_name_ci_idx ON leagues (lower(name));
