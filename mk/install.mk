# mk/install.mk - `make install`: the three programs, libscope (shared and
# static), its header and pkg-config file, the man pages and the schemas,
# under $(DESTDIR)$(PREFIX) (PREFIX defaults to /usr/local).  `make
# uninstall` removes exactly those files.  Builds first, as `make all` does;
# nothing is built as root that the build directory does not already hold
# when `make all` ran before.
#
# The shared library goes in as libscope.so.VERSION, with the soname link
# libscope.so.0 (what programs load) and the development link libscope.so
# (what -lscope finds).  The programs link libscope's parts statically and
# the BPF object is built into scoped, so they need nothing else from here.

PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
# Under /usr, libraries go where Debian's multiarch layout puts them
# (/usr/lib/x86_64-linux-gnu); elsewhere in PREFIX/lib.
MULTIARCH := $(shell $(CC) -print-multiarch 2>/dev/null)
LIBDIR ?= $(PREFIX)/lib$(if $(and $(filter /usr,$(PREFIX)),$(MULTIARCH)),/$(MULTIARCH))
INCLUDEDIR ?= $(PREFIX)/include
MANDIR ?= $(PREFIX)/share/man
DATADIR ?= $(PREFIX)/share/scoped
DOCDIR ?= $(PREFIX)/share/doc/scoped
COMPLETIONDIR ?= $(PREFIX)/share/bash-completion/completions
INSTALL ?= install

SCOPE_VERSION := $(shell sed -n 's/^\#define SCOPE_VERSION_STRING "\(.*\)"/\1/p' include/scope.h)
INSTALL_PROGRAMS := scoped scopecmd scopetop
INSTALL_MAN1 := docs/scopecmd.1 docs/scopetop.1
INSTALL_MAN8 := docs/scoped.8
INSTALL_MAN3 := docs/scope.3
INSTALL_SCHEMAS := $(wildcard schemas/*.json schemas/*.md)
INSTALL_DOCS := README.md $(wildcard docs/*.md)
INSTALL_DIST := dist/systemd/scoped.service dist/systemd/scoped.sysusers.conf dist/profile.d/scoped.sh

# The .pc file names the install directories, so it is made again whenever
# they change: an install under one PREFIX never ships another's paths.
PC_DIRS_STAMP := $(BUILD)/pcdirs.stamp
PC_DIRS_NOW := $(strip $(PREFIX) | $(LIBDIR) | $(INCLUDEDIR))
ifneq ($(filter install,$(MAKECMDGOALS))$(filter $(BUILD)/libscope.pc,$(MAKECMDGOALS)),)
ifneq ($(PC_DIRS_NOW),$(strip $(file <$(PC_DIRS_STAMP))))
$(shell mkdir -p $(BUILD))
$(file >$(PC_DIRS_STAMP),$(PC_DIRS_NOW))
endif
endif
$(PC_DIRS_STAMP):
	@mkdir -p $(@D) && printf '%s\n' '$(PC_DIRS_NOW)' >$@

# pkg-config: libunwind and pthread only for static linking (the shared
# library records its own dependencies).
$(BUILD)/libscope.pc: include/scope.h mk/install.mk $(PC_DIRS_STAMP)
	@mkdir -p $(@D)
	$(E) GEN $@
	$(Q)printf '%s\n' 'prefix=$(PREFIX)' 'libdir=$(LIBDIR)' 'includedir=$(INCLUDEDIR)' '' \
		'Name: libscope' \
		'Description: structured concurrency for C, observable by scoped' \
		'Version: $(SCOPE_VERSION)' \
		'Cflags: -I$${includedir}' \
		'Libs: -L$${libdir} -lscope' \
		'Libs.private: -lunwind -lpthread' >$@

# The installed static archive is one relocatable object in which only the
# scope_* functions stay global, so that a program linking it meets none of
# the runtime's internal names (the build's own libscope.a keeps them: the
# unit tests call internals).
$(BUILD)/lib/public/libscope.a: $(LIBSCOPE_OBJS)
	@mkdir -p $(@D)
	$(E) AR $@
	$(Q)ld -r -o $(@D)/libscope.o $^
	$(Q)nm -g --defined-only $(@D)/libscope.o | awk 'NF == 3 && $$3 ~ /^scope_/ { print $$3 }' \
		>$(@D)/public.syms
	$(Q)objcopy --keep-global-symbols=$(@D)/public.syms $(@D)/libscope.o
	$(Q)rm -f $@ && ar rcs $@ $(@D)/libscope.o

install: all $(BUILD)/libscope.pc $(BUILD)/lib/public/libscope.a
	$(INSTALL) -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(INCLUDEDIR) \
		$(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man3 $(DESTDIR)$(MANDIR)/man8 \
		$(DESTDIR)$(DATADIR)/schemas
	$(INSTALL) -m 755 $(addprefix $(BUILD)/bin/,$(INSTALL_PROGRAMS)) $(DESTDIR)$(BINDIR)/
	$(INSTALL) -m 755 $(BUILD)/lib/libscope.so $(DESTDIR)$(LIBDIR)/libscope.so.$(SCOPE_VERSION)
	ln -sf libscope.so.$(SCOPE_VERSION) $(DESTDIR)$(LIBDIR)/libscope.so.0
	ln -sf libscope.so.0 $(DESTDIR)$(LIBDIR)/libscope.so
	$(INSTALL) -m 644 $(BUILD)/lib/public/libscope.a $(DESTDIR)$(LIBDIR)/
	$(INSTALL) -m 644 $(BUILD)/libscope.pc $(DESTDIR)$(LIBDIR)/pkgconfig/
	$(INSTALL) -m 644 include/scope.h $(DESTDIR)$(INCLUDEDIR)/
	$(INSTALL) -m 644 $(INSTALL_MAN1) $(DESTDIR)$(MANDIR)/man1/
	$(INSTALL) -m 644 $(INSTALL_MAN8) $(DESTDIR)$(MANDIR)/man8/
	$(INSTALL) -m 644 $(INSTALL_MAN3) $(DESTDIR)$(MANDIR)/man3/
	$(INSTALL) -m 644 $(INSTALL_SCHEMAS) $(DESTDIR)$(DATADIR)/schemas/
	$(INSTALL) -d $(DESTDIR)$(DOCDIR) $(DESTDIR)$(DATADIR)/dist $(DESTDIR)$(COMPLETIONDIR)
	$(INSTALL) -m 644 $(INSTALL_DOCS) $(DESTDIR)$(DOCDIR)/
	$(INSTALL) -m 644 $(INSTALL_DIST) $(DESTDIR)$(DATADIR)/dist/
	$(INSTALL) -m 644 dist/bash-completion/scopecmd $(DESTDIR)$(COMPLETIONDIR)/scopecmd
	ln -sf scopecmd $(DESTDIR)$(COMPLETIONDIR)/scopetop
	ln -sf scopecmd $(DESTDIR)$(COMPLETIONDIR)/scoped

uninstall:
	rm -f $(addprefix $(DESTDIR)$(BINDIR)/,$(INSTALL_PROGRAMS))
	rm -f $(DESTDIR)$(LIBDIR)/libscope.so.$(SCOPE_VERSION) $(DESTDIR)$(LIBDIR)/libscope.so.0 \
		$(DESTDIR)$(LIBDIR)/libscope.so $(DESTDIR)$(LIBDIR)/libscope.a \
		$(DESTDIR)$(LIBDIR)/pkgconfig/libscope.pc $(DESTDIR)$(INCLUDEDIR)/scope.h
	rm -f $(addprefix $(DESTDIR)$(MANDIR)/man1/,$(notdir $(INSTALL_MAN1))) \
		$(addprefix $(DESTDIR)$(MANDIR)/man8/,$(notdir $(INSTALL_MAN8))) \
		$(addprefix $(DESTDIR)$(MANDIR)/man3/,$(notdir $(INSTALL_MAN3)))
	rm -f $(addprefix $(DESTDIR)$(DATADIR)/schemas/,$(notdir $(INSTALL_SCHEMAS)))
	rm -f $(addprefix $(DESTDIR)$(DOCDIR)/,$(notdir $(INSTALL_DOCS)))
	rm -f $(addprefix $(DESTDIR)$(DATADIR)/dist/,$(notdir $(INSTALL_DIST)))
	rm -f $(addprefix $(DESTDIR)$(COMPLETIONDIR)/,scopecmd scopetop scoped)
	-rmdir $(DESTDIR)$(DATADIR)/schemas $(DESTDIR)$(DATADIR)/dist $(DESTDIR)$(DATADIR) \
		$(DESTDIR)$(DOCDIR) 2>/dev/null

.PHONY: install uninstall
