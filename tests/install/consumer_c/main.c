/* tests/install/consumer_c/main.c — takes and gives back a lease through
 * an installed libbaton.so (memory: store), as a user's C program would;
 * built once with pkg-config and once with find_package(baton). */
#include <baton/baton.h>
#include <inttypes.h>
#include <stdio.h>

static int fail(baton_error_t* err) {
  fprintf(stderr, "%s: %s\n", baton_errc_name(baton_error_code(err)),
          baton_error_message(err));
  baton_error_destroy(err);
  return 1;
}

int main(void) {
  if (baton_version() != BATON_VERSION_NUMBER) {
    fprintf(stderr, "header %s, library %s\n", BATON_VERSION_STRING,
            baton_version_string());
    return 1;
  }
  baton_client_t* client = NULL;
  baton_error_t* err = baton_client_open("memory:", NULL, &client);
  if (err) return fail(err);
  baton_lease_t* lease = NULL;
  err = baton_client_acquire(client, "installed", 1000, NULL, NULL, &lease);
  if (err) return fail(err);
  int released = 0;
  err = baton_client_release(client, lease, &released);
  if (err) return fail(err);
  if (!released) {
    fprintf(stderr, "release failed\n");
    return 1;
  }
  printf("ok fencing=%" PRIu64 "\n", baton_lease_fencing_token(lease));
  baton_lease_destroy(lease);
  baton_client_destroy(client);
  return 0;
}
