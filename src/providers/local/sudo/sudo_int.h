/* SPDX-License-Identifier: MIT */
/* The sbx-sudo binary's parts: front end (front.c), broker (broker.c). */
#ifndef SBX_SUDO_INT_H
#define SBX_SUDO_INT_H

#include <stddef.h>

/* The sandbox's sudo: a request to the broker. Returns the exit code. */
int sudo_front_main(int argc, char **argv);
/* Run by init as the sandbox's root with the listener as fd 0. */
int sudo_broker_main(const char *policy);
/* A connection to the broker, or -1 with err filled. */
int sudo_connect(char *err, size_t errlen);

#endif
