#!/bin/sh
# A CGI script that is not Perl: executed through its #! line, showing the
# interpreter is nothing special to plxd.
printf 'Content-Type: text/plain\r\n\r\n'
printf 'Hello from %s\n' "$0"
printf 'method=%s query=%s\n' "$REQUEST_METHOD" "$QUERY_STRING"
uptime
