-- depends: 0070_listener_takeover
-- A console session is bound to the origin it was opened on (issue 35): scheme://host:port of the
-- sign-in request. Cookies are not port-scoped, so a browser sends a plain-localhost console's cookie
-- to every port of the host; another console (or anything else) on another port must not accept it.
-- Sessions from before this migration have none and end (their users sign in again).
ALTER TABLE console_sessions ADD COLUMN origin TEXT;
