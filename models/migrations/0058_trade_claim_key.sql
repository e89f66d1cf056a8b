-- depends: 0057_api_key_names
-- Which API key made each trade claim (issue 35): null from the CLI and the library.
ALTER TABLE execution_log ADD COLUMN created_by_key_id TEXT;
