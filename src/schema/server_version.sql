-- The server's version, as a number to compare and as it names itself.
SELECT current_setting('server_version_num')::int, current_setting('server_version')
