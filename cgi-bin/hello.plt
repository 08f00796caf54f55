print "Content-Type: text/html\n\n";
print "<html><body>\n";
print "Hello world!\n";
print "</body></html>\n";
