// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A program whose last domain closes while it exits, as a plugin's
 * does: its fi_getinfo() loads the ummunotify provider, then it
 * dlopen()s a plugin (libofi-exit-plugin.so, beside it) that opens a
 * verbs;ofi_rxm domain, caches a registration and closes the domain in
 * its destructor.  glibc runs the destructors of the provider, the plugin
 * and libfabric in that order: the domain closes, and libfabric stops the
 * monitor, between our destructor and libfabric's fi_fini().  The program
 * must exit: libfabric 1.21 and later hung where stop() closed the import.
 *
 * Exit status: 0 it exited, 2 anything went wrong, 4 no RDMA device.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <rdma/fabric.h>

int main(void)
{
	char path[PATH_MAX];
	struct fi_info *info = NULL;
	ssize_t n;
	char *slash;
	int (*run)(void);
	void *plugin;

	/* Any fi_getinfo() runs fi_ini(), which loads the providers. */
	fi_getinfo(FI_VERSION(1, 13), NULL, NULL, 0, NULL, &info);
	fi_freeinfo(info);

	n = readlink("/proc/self/exe", path, sizeof(path) - 32);
	slash = n > 0 ? memrchr(path, '/', (size_t)n) : NULL;
	if (!slash) {
		fprintf(stderr, "ofi-exit: where am I?\n");
		return 2;
	}
	strcpy(slash + 1, "libofi-exit-plugin.so");
	plugin = dlopen(path, RTLD_NOW);
	run = plugin ? (int (*)(void))dlsym(plugin, "ofi_exit_plugin_run") :
		       NULL;
	if (!run) {
		fprintf(stderr, "ofi-exit: %s\n", dlerror());
		return 2;
	}
	return run();
}
