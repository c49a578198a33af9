/*
 * cli.h - the verbs of the corral command, each in a file of its own and
 * found by main.c's table of commands.
 */
#ifndef CORRAL_CLI_H
#define CORRAL_CLI_H

#include "corral.h"

#define EXIT_CORRAL 125		/* corral itself could not do what was asked */

int cmd_run(int argc, char **argv);		/* run.c */
int cmd_doctor(int argc, char **argv);
int cmd_policy(int argc, char **argv);
int cmd_audit(int argc, char **argv);
int cmd_serve(int argc, char **argv);		/* serve.c: the daemon's options */
/* clients of the daemon's API, over client.h */
int cmd_create(int argc, char **argv);
int cmd_exec(int argc, char **argv);
int cmd_cp(int argc, char **argv);
int cmd_pause(int argc, char **argv);		/* pause.c */
int cmd_resume(int argc, char **argv);		/* pause.c */
int cmd_halt(int argc, char **argv);
int cmd_rm(int argc, char **argv);
int cmd_ls(int argc, char **argv);
int cmd_logs(int argc, char **argv);
int cmd_events(int argc, char **argv);

void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
