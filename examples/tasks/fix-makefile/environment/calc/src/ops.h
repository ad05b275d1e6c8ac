#ifndef OPS_H
#define OPS_H

#define CALC_VERSION "1.2.0"

long op_apply(long a, char op, long b, int *ok);

#endif
