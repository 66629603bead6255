// Stand-in for an overhead program whose library (gloo or MPI) is not on this machine.
#include <cstdio>

int main() {
  fprintf(stderr, "this overhead program was built without its library (see tools/setup.sh)\n");
  return 1;
}
