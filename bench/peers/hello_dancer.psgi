# The Dancer2 hello app for `bench/run --peers`: one route, a short text
# answer, the app as the file's last value. bench/run serves this same
# file under plxd ([mount], in worker processes and in interpreter
# threads) and under Starman, each asked for the route '/'.
use Dancer2;

get '/' => sub { "Hello world!\n" };

to_app;
