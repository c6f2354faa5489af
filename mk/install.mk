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
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
MANDIR ?= $(PREFIX)/share/man
DATADIR ?= $(PREFIX)/share/scoped
INSTALL ?= install

SCOPE_VERSION := $(shell sed -n 's/^\#define SCOPE_VERSION_STRING "\(.*\)"/\1/p' include/scope.h)
INSTALL_PROGRAMS := scoped scopecmd scopetop
INSTALL_MAN1 := docs/scopecmd.1 docs/scopetop.1
INSTALL_MAN8 := docs/scoped.8
INSTALL_SCHEMAS := $(wildcard schemas/*.json schemas/*.md)

# pkg-config: libunwind and pthread only for static linking (the shared
# library records its own dependencies).
$(BUILD)/libscope.pc: include/scope.h mk/install.mk
	@mkdir -p $(@D)
	$(E) GEN $@
	$(Q)printf '%s\n' 'prefix=$(PREFIX)' 'libdir=$(LIBDIR)' 'includedir=$(INCLUDEDIR)' '' \
		'Name: libscope' \
		'Description: structured concurrency for C, observable by scoped' \
		'Version: $(SCOPE_VERSION)' \
		'Cflags: -I$${includedir}' \
		'Libs: -L$${libdir} -lscope' \
		'Libs.private: -lunwind -lpthread' >$@

install: all $(BUILD)/libscope.pc
	$(INSTALL) -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(INCLUDEDIR) \
		$(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man8 $(DESTDIR)$(DATADIR)/schemas
	$(INSTALL) -m 755 $(addprefix $(BUILD)/bin/,$(INSTALL_PROGRAMS)) $(DESTDIR)$(BINDIR)/
	$(INSTALL) -m 755 $(BUILD)/lib/libscope.so $(DESTDIR)$(LIBDIR)/libscope.so.$(SCOPE_VERSION)
	ln -sf libscope.so.$(SCOPE_VERSION) $(DESTDIR)$(LIBDIR)/libscope.so.0
	ln -sf libscope.so.0 $(DESTDIR)$(LIBDIR)/libscope.so
	$(INSTALL) -m 644 $(BUILD)/lib/libscope.a $(DESTDIR)$(LIBDIR)/
	$(INSTALL) -m 644 $(BUILD)/libscope.pc $(DESTDIR)$(LIBDIR)/pkgconfig/
	$(INSTALL) -m 644 include/scope.h $(DESTDIR)$(INCLUDEDIR)/
	$(INSTALL) -m 644 $(INSTALL_MAN1) $(DESTDIR)$(MANDIR)/man1/
	$(INSTALL) -m 644 $(INSTALL_MAN8) $(DESTDIR)$(MANDIR)/man8/
	$(INSTALL) -m 644 $(INSTALL_SCHEMAS) $(DESTDIR)$(DATADIR)/schemas/

uninstall:
	rm -f $(addprefix $(DESTDIR)$(BINDIR)/,$(INSTALL_PROGRAMS))
	rm -f $(DESTDIR)$(LIBDIR)/libscope.so.$(SCOPE_VERSION) $(DESTDIR)$(LIBDIR)/libscope.so.0 \
		$(DESTDIR)$(LIBDIR)/libscope.so $(DESTDIR)$(LIBDIR)/libscope.a \
		$(DESTDIR)$(LIBDIR)/pkgconfig/libscope.pc $(DESTDIR)$(INCLUDEDIR)/scope.h
	rm -f $(addprefix $(DESTDIR)$(MANDIR)/man1/,$(notdir $(INSTALL_MAN1))) \
		$(addprefix $(DESTDIR)$(MANDIR)/man8/,$(notdir $(INSTALL_MAN8)))
	rm -f $(addprefix $(DESTDIR)$(DATADIR)/schemas/,$(notdir $(INSTALL_SCHEMAS)))
	-rmdir $(DESTDIR)$(DATADIR)/schemas $(DESTDIR)$(DATADIR) 2>/dev/null

.PHONY: install uninstall
