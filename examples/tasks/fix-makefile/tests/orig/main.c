#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ops.h"

int main(int argc, char **argv)
{
	int ok;
	long r;

	if (argc == 2 && strcmp(argv[1], "--version") == 0) {
		printf("calc %s\n", CALC_VERSION);
		return 0;
	}
	if (argc != 4 || strlen(argv[2]) != 1) {
		fprintf(stderr, "usage: calc A OP B   (OP is one of + - x /)\n");
		return 2;
	}
	r = op_apply(strtol(argv[1], NULL, 10), argv[2][0], strtol(argv[3], NULL, 10), &ok);
	if (!ok) {
		fprintf(stderr, "calc: invalid operation\n");
		return 1;
	}
	printf("%ld\n", r);
	return 0;
}
