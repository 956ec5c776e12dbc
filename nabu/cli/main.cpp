#include "nabu/cli/commands/cli.h"

int main(int argc, char** argv) { return nabu::cli::run_main(argc, argv); }
