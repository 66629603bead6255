// A shared object named like a plugin that is not one: it has no entry point.
extern "C" int not_a_distcomm_plugin() { return 42; }
