# mk/alloc.mk - the allocation-failure test reroutes the product objects'
# allocation calls to its own failing wrappers with the linker's --wrap.

ALLOC_WRAP := malloc calloc realloc aligned_alloc strdup open_memstream
$(BUILD)/tests/test_alloc_fail: private SC_LDFLAGS += $(foreach f,$(ALLOC_WRAP),-Wl,--wrap=$(f))
