/* plxd: command line, start-up (the listening socket, privileges, the
 * master), and the serving process's signal loop (SIGHUP reloads, SIGTERM
 * and SIGINT stop gracefully). */
#include "alloc.h"
#include "clock.h"
#include "config.h"
#include "help.h"
#include "locale_fork.h"
#include "modules.h"
#include "request.h"
#include "http.h"
#include "log.h"
#include "master.h"
#include "site.h"
#include "stats.h"
#include "systemd.h"
#include "version.h"

#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef PLXD_DEFAULT_CONFIG
#define PLXD_DEFAULT_CONFIG "/usr/local/etc/plxd/plxd.conf"
#endif
/* The same file from the binary's folder (bin/): "" when either is absolute. */
#ifndef PLXD_CONFIG_FROM_BIN
#define PLXD_CONFIG_FROM_BIN "../etc/plxd/plxd.conf"
#endif

struct options {
	const char *config;
	const char *listen; /* overrides [server] listen */
	const char *root;   /* overrides [server] root */
	const char *app;    /* a PSGI app served at / ([mount]) */
	int check;
	int no_master; /* overrides [server] master */
};

static int parse_args(int argc, char **argv, struct options *o)
{
	/* clang-format off */
	static const struct option longopts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "listen", required_argument, NULL, 'l' },
		{ "root", required_argument, NULL, 'r' },
		{ "app", required_argument, NULL, 'a' },
		{ "check", no_argument, NULL, 'k' },
		{ "no-master", no_argument, NULL, 'M' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", optional_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	/* clang-format on */
	int c;
	while ((c = getopt_long(argc, argv, "c:l:r:a:Vh", longopts, NULL)) != -1) {
		switch (c) {
		case 'c':
			o->config = optarg;
			break;
		case 'l':
			o->listen = optarg;
			break;
		case 'r':
			o->root = optarg;
			break;
		case 'a':
			o->app = optarg;
			break;
		case 'k':
			o->check = 1;
			break;
		case 'M':
			o->no_master = 1;
			break;
		case 'V':
			printf("plxd %s (%s)\nhandler interface %08x\n", PLXD_VERSION,
					PLXD_GIT_REVISION, PLXD_HANDLER_ABI);
			exit(0);
		case 'h': {
			enum help_format format = HELP_TEXT;
			if (optarg && help_format_parse(optarg, &format) < 0) {
				fprintf(stderr, "plxd: --help=%s: expected text, markdown, man8 or man5\n",
						optarg);
				return -1;
			}
			help_print(stdout, format);
			exit(0);
		}
		default:
			help_usage(stderr);
			return -1;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "plxd: unexpected argument '%s'\n", argv[optind]);
		help_usage(stderr);
		return -1;
	}
	return 0;
}

static struct config *load(const struct options *o, char **errors)
{
	/* Without --config: the configuration installed with this binary,
	 * looked for from its own folder first, so that a tree installed under
	 * another prefix than the build's, or staged with DESTDIR and run where
	 * it lies, reads its own and not another installation's. */
	char installed[PATH_MAX];
	const char *file = o->config;
	/* --app alone is the whole site, as plackup's FILE: no configuration
	 * file but one given, the app's folder the root. */
	if (!file && !o->app
			&& modules_from_binary(PLXD_CONFIG_FROM_BIN, installed, sizeof installed)
					== 0)
		file = installed;
	if (!file && !o->app && access(PLXD_DEFAULT_CONFIG, F_OK) == 0)
		file = PLXD_DEFAULT_CONFIG;
	struct config_override overrides[5];
	size_t n = 0;
	char *app_dir = NULL;
	if (o->app) {
		overrides[n++] = (struct config_override){ "--app", "mount", "/", o->app };
		if (!o->config) {
			char *copy = xstrdup(o->app);
			app_dir = xstrdup(dirname(copy));
			free(copy);
			overrides[n++] = (struct config_override){ "--app", "handlers", ".psgi",
				"perl" };
			if (!o->root)
				overrides[n++] = (struct config_override){ "--app", "server",
					"root", app_dir };
		}
	}
	if (o->listen)
		overrides[n++] = (struct config_override){ "--listen", "server", "listen",
			o->listen };
	if (o->root)
		overrides[n++] = (struct config_override){ "--root", "server", "root", o->root };
	struct config *c = config_load(file, overrides, n, modules_find, NULL, errors);
	free(app_dir);
	return c;
}

static int open_logs(const struct server_conf *s, char *err, size_t errlen)
{
	enum log_level level = PLXD_LOG_INFO;
	log_level_parse(s->log_level, &level);
	return log_open(s->error_log, s->access_log, level, err, errlen);
}

/* Started as root with [server] user set: become that user, after binding
 * the port and opening the logs (which are given to the user so that a
 * SIGHUP can reopen them). */
static int drop_privileges(const struct config *c)
{
	const char *user = c->server.user;
	if (!user[0])
		return 0;
	if (geteuid() != 0) {
		plxd_log(PLXD_LOG_INFO, "not started as root: [server] user %s ignored", user);
		return 0;
	}
	errno = 0;
	struct passwd *pw = getpwnam(user);
	if (!pw) {
		plxd_log(PLXD_LOG_ERROR, "%s: [server] user %s: no such user", c->file, user);
		return -1;
	}
	log_chown(pw->pw_uid, pw->pw_gid);
	if (initgroups(pw->pw_name, pw->pw_gid) < 0 || setgid(pw->pw_gid) < 0
			|| setuid(pw->pw_uid) < 0) {
		plxd_log(PLXD_LOG_ERROR, "cannot become user %s: %s", user, strerror(errno));
		return -1;
	}
	if (strcmp(c->file, "(no configuration file)") != 0 && access(c->file, R_OK) < 0)
		plxd_log(PLXD_LOG_WARN, "user %s cannot read %s: a reload (SIGHUP) will fail", user,
				c->file);
	plxd_log(PLXD_LOG_INFO, "running as user %s (uid %u)", user, (unsigned)pw->pw_uid);
	return 0;
}

/* Logs each line of text (errors or a config's warnings) at level. */
static void log_lines(enum log_level level, const char *text)
{
	const char *p = text ? text : "";
	while (*p) {
		size_t n = strcspn(p, "\n");
		plxd_log(level, "%.*s", (int)n, p);
		p += n + (p[n] == '\n');
	}
}

/* The keys of one section that need a restart keep their running values
 * in now, each change logged. */
static void keep_section(const struct conf_key *keys, const char *section, void *now,
		const void *running)
{
	for (const struct conf_key *k = keys; k->name; k++) {
		if (!(k->flags & CONF_RESTART) || conf_value_equal(k, now, running))
			continue;
		plxd_log(PLXD_LOG_WARN, "[%s] %s changed: it takes effect only after a restart",
				section, k->name);
		conf_value_copy(k, now, running);
	}
}

/* The keys that need a restart of plxd keep their running values in c. */
static void keep_restart_keys(struct config *c, const struct config *running)
{
	keep_section(server_keys, "server", &c->server, &running->server);
	keep_section(status_keys, "status", &c->status, &running->status);
}

static void reload(const struct options *o)
{
	plxd_log(PLXD_LOG_INFO, "SIGHUP: reloading the configuration");
	char *errors = NULL;
	struct config *c = load(o, &errors);
	if (!c) {
		log_lines(PLXD_LOG_ERROR, errors);
		plxd_log(PLXD_LOG_ERROR, "the new configuration is invalid: kept the running one");
		free(errors);
		return;
	}
	struct site *old = site_acquire();
	keep_restart_keys(c, old->config);
	site_release(old);

	char err[512];
	if (open_logs(&c->server, err, sizeof err) < 0) {
		plxd_log(PLXD_LOG_ERROR, "%s: kept the running configuration", err);
		config_free(c);
		return;
	}
	log_lines(PLXD_LOG_WARN, c->warnings);
	struct site *site = site_create(c, err, sizeof err);
	if (!site) {
		plxd_log(PLXD_LOG_ERROR, "%s: kept the running configuration", err);
		return;
	}
	if (modules_apply(site->config) < 0) {
		plxd_log(PLXD_LOG_ERROR,
				"a handler failed to start: kept the running configuration");
		site_release(site);
		return;
	}
	site_install(site);
	plxd_log(PLXD_LOG_INFO, "configuration reloaded");
}

/* Whether a thread besides this one still runs: one that a handler had to
 * leave running at the stop (an interpreter thread stuck in C code). */
static int threads_left(void)
{
	FILE *f = fopen("/proc/self/status", "re");
	if (!f)
		return 0;
	char line[256];
	int n = 1;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "Threads: %d", &n) == 1)
			break;
	fclose(f);
	return n > 1;
}

/* A serving process started after one died reads the configuration file
 * again, as a reload would: a restart after a SIGHUP keeps what the reload
 * gave. The keys that need a restart keep the master's values (the socket
 * and the user are the master's); a file that no longer loads leaves the
 * configuration the master started with. */
static struct config *config_for_restart(const struct options *o, struct config *started)
{
	char *errors = NULL;
	struct config *c = load(o, &errors);
	if (!c) {
		log_lines(PLXD_LOG_ERROR, errors);
		plxd_log(PLXD_LOG_ERROR,
				"the configuration file is invalid: the serving process runs with "
				"the configuration plxd started with");
		free(errors);
		return started;
	}
	keep_restart_keys(c, started);
	char err[512];
	if (open_logs(&c->server, err, sizeof err) < 0) {
		plxd_log(PLXD_LOG_ERROR,
				"%s: the serving process runs with the configuration plxd started with",
				err);
		config_free(c);
		return started;
	}
	log_lines(PLXD_LOG_WARN, c->warnings);
	config_free(started);
	return c;
}

/* The serving process: everything but the listening socket, which it is
 * given. Returns its exit status. */
static int serve(const struct options *o, struct config *config, int listen_fd, const char *url)
{
	char err[512];
	/* Checked before anything starts: without one nothing can be
	 * served. The descriptor is left open: its number may be some other
	 * file's by now. */
	if (http_listening(listen_fd, err, sizeof err) < 0) {
		plxd_log(PLXD_LOG_ERROR, "cannot serve: %s", err);
		config_free(config);
		master_tell(MASTER_FAILED);
		return 1;
	}
	struct site *site = site_create(config, err, sizeof err);
	if (!site) {
		plxd_log(PLXD_LOG_ERROR, "%s", err);
		close(listen_fd);
		master_tell(MASTER_FAILED);
		return 1;
	}
	stats_init(site->config->status.counters);
	if (modules_apply(site->config) < 0) {
		close(listen_fd);
		modules_stop_all();
		site_release(site);
		modules_unload();
		master_tell(MASTER_FAILED);
		return 1;
	}
	site_install(site);
	unsigned long shutdown_ms = site->config->server.shutdown_timeout_ms;
	static const struct http_handlers handlers = {
		.access = request_access,
		.completed = request_completed,
		.abort_all = request_abort_all,
	};
	if (http_start(listen_fd, &site->config->server, &handlers, err, sizeof err) < 0) {
		plxd_log(PLXD_LOG_ERROR, "%s", err);
		close(listen_fd);
		modules_stop_all();
		site_install(NULL);
		modules_unload();
		master_tell(MASTER_FAILED);
		return 1;
	}
	plxd_log(PLXD_LOG_INFO, "plxd %s listening on %s", PLXD_VERSION, url);
	/* Under a master, the master prints the line, once. */
	if (!master_supervised()) {
		printf("listening on %s\n", url);
		fflush(stdout);
	}
	master_tell(MASTER_READY);

	sigset_t signals;
	sigemptyset(&signals);
	sigaddset(&signals, SIGHUP);
	sigaddset(&signals, SIGTERM);
	sigaddset(&signals, SIGINT);
	unsigned long alive_ms = master_alive_ms();
	for (;;) {
		int sig;
		if (alive_ms) {
			struct timespec ts = { (time_t)(alive_ms / 1000),
				(long)(alive_ms % 1000) * 1000000L };
			sig = sigtimedwait(&signals, NULL, &ts);
			if (sig < 0 && errno == EAGAIN)
				master_tell(MASTER_ALIVE);
		} else {
			sig = sigwaitinfo(&signals, NULL);
		}
		if (sig == SIGHUP) {
			master_tell(MASTER_RELOADING);
			reload(o);
			struct site *now = site_acquire();
			shutdown_ms = now->config->server.shutdown_timeout_ms;
			site_release(now);
			master_tell(MASTER_RELOADED);
		} else if (sig == SIGTERM || sig == SIGINT) {
			break;
		}
	}
	master_tell(MASTER_STOPPING);
	plxd_log(PLXD_LOG_INFO,
			"stopping: no new connections; waiting up to %lu ms for requests in flight",
			shutdown_ms);
	uint64_t stop_at = clock_ms() + shutdown_ms;
	http_quiesce(shutdown_ms);
	uint64_t now = clock_ms();
	unsigned left = http_wait_idle(now < stop_at ? stop_at - now : 0);
	if (left)
		plxd_log(PLXD_LOG_WARN,
				"stopping with %u requests still running: closing their connections",
				left);
	if (http_stop()) {
		/* A request still runs on an event thread, in a handler's code:
		 * stopping the handlers or unloading them would pull its
		 * ground away. The process ends around it. */
		plxd_log(PLXD_LOG_INFO, "stopped, without stopping the handlers");
		log_close();
		_exit(0);
	}
	modules_stop_all();
	site_install(NULL);
	modules_unload();
	plxd_log(PLXD_LOG_INFO, "stopped");
	log_close();
	/* Such a thread may be inside a library that exit's handlers tear
	 * down: the process ends without them. */
	if (threads_left())
		_exit(0);
	return 0;
}

/* The listening socket: the one systemd passed, or bound here. */
static int listen_socket(const struct config *config)
{
	char err[512];
	int fd = systemd_listen_fd(err, sizeof err);
	if (fd >= 0) {
		plxd_log(PLXD_LOG_INFO,
				"listening on the socket systemd passed; [server] listen is not used");
		return fd;
	}
	if (err[0]) {
		plxd_log(PLXD_LOG_ERROR, "%s", err);
		return -1;
	}
	fd = http_listen(config->server.listen, err, sizeof err);
	if (fd < 0)
		plxd_log(PLXD_LOG_ERROR, "%s", err);
	return fd;
}

/* Opens the logs, takes the listening socket and drops privileges; then,
 * unless told otherwise, becomes the master, which returns only in the
 * serving processes it starts. Returns the exit status. */
static int start(const struct options *o, struct config *config)
{
	char err[512];
	if (open_logs(&config->server, err, sizeof err) < 0) {
		fprintf(stderr, "plxd: %s\n", err);
		config_free(config);
		return 1;
	}
	log_lines(PLXD_LOG_WARN, config->warnings);
	int listen_fd = listen_socket(config);
	if (listen_fd < 0) {
		config_free(config);
		return 1;
	}
	if (drop_privileges(config) < 0) {
		close(listen_fd);
		config_free(config);
		return 1;
	}
	char url[128];
	http_url(listen_fd, url, sizeof url);
	if (config->server.master && !o->no_master) {
		enum log_level level = PLXD_LOG_INFO;
		log_level_parse(config->server.log_level, &level);
		struct master_spec spec = {
			.listen_fd = listen_fd,
			.url = url,
			.error_log = config->server.error_log,
			.access_log = config->server.access_log,
			.level = level,
		};
		master_run(&spec);
		if (master_restarts() > 0)
			config = config_for_restart(o, config);
	}
	return serve(o, config, listen_fd, url);
}

#if defined(__SANITIZE_ADDRESS__)
/* Under LeakSanitizer: in-process Perl ([perl] isolation = thread) leaves
 * libperl's allocations, and those of the XS libraries scripts load, to the
 * process exit, as a worker does (the same list as
 * handlers/perl/lsan-libperl.supp, which says why each is there). Leaks of
 * plxd's own code are still reported. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
	return "leak:libperl.so\nleak:XSAccessor.so\nleak:libcrypto.so\n";
}
#endif

int main(int argc, char **argv)
{
	struct options o = { 0 };
	if (parse_args(argc, argv, &o) < 0)
		return 1;
	locale_fork_init();

	/* Every thread inherits this mask, so the signals arrive only at
	 * sigwaitinfo() in the main loop. SIGPIPE is ignored: a client or a
	 * child that goes away must show up as EPIPE, not end plxd. */
	sigset_t signals;
	sigemptyset(&signals);
	sigaddset(&signals, SIGHUP);
	sigaddset(&signals, SIGTERM);
	sigaddset(&signals, SIGINT);
	pthread_sigmask(SIG_BLOCK, &signals, NULL);
	signal(SIGPIPE, SIG_IGN);

	char *errors = NULL;
	struct config *config = load(&o, &errors);
	if (!config) {
		fprintf(stderr, "%s\nplxd: the configuration is invalid: not starting\n", errors);
		free(errors);
		modules_unload();
		return 1;
	}
	if (o.check) {
		if (config->warnings)
			fprintf(stderr, "%s\n", config->warnings);
		char err[512];
		struct site *site = site_create(config, err, sizeof err);
		if (!site) {
			fprintf(stderr, "%s\n", err);
			modules_unload();
			return 1;
		}
		printf("plxd: %s: configuration OK\n", site->config->file);
		site_release(site);
		modules_unload();
		return 0;
	}
	return start(&o, config);
}
