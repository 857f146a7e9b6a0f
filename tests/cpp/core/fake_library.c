/* A real shared library that exports nothing MSPTI-like: the "missing required symbols" case of
   MsptiLibraryTest, and (copied as libprofapi.so) a stand-in for CANN's libprofapi. */
int torch_mspti_fake_library_marker(void) { return 42; }
