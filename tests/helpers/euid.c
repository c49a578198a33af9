/* euid.c - print the effective uid; installed setuid root by the tests. */
#include <stdio.h>
#include <unistd.h>

int main(void)
{
	printf("euid=%d uid=%d\n", (int)geteuid(), (int)getuid());
	return geteuid() == 0 ? 1 : 0;
}
