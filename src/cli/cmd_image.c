/* SPDX-License-Identifier: MIT */
/* `sbx image ...` (placeholder until the image store lands). */
#include <stdio.h>

#include "cli.h"

int cmd_image(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "sbx image: not implemented yet\n");
	return EXIT_FAIL;
}
