#include "ops.h"

long op_apply(long a, char op, long b, int *ok)
{
	*ok = 1;
	switch (op) {
	case '+': return a + b;
	case '-': return a - b;
	case 'x': return a * b;
	case '/':
		if (b == 0)
			break;
		return a / b;
	}
	*ok = 0;
	return 0;
}
