/* SPDX-License-Identifier: MIT */
/* Placeholder sandbox commands. */
#include "cli.h"
int cmd_run(int argc, char **argv) { (void)argc; (void)argv; return EXIT_FAIL; }
int cmd_create(int argc, char **argv) { (void)argc; (void)argv; return EXIT_FAIL; }
int cmd_exec(int argc, char **argv) { (void)argc; (void)argv; return EXIT_FAIL; }
int cmd_cp(int argc, char **argv) { (void)argc; (void)argv; return EXIT_FAIL; }
int cmd_rm(int argc, char **argv) { (void)argc; (void)argv; return EXIT_FAIL; }
int cmd_ls(int argc, char **argv) { (void)argc; (void)argv; return EXIT_FAIL; }
int cmd_gc(int argc, char **argv) { (void)argc; (void)argv; return EXIT_FAIL; }
