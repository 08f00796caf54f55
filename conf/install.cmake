# Run by cmake --install: writes plxd.conf to SYSCONFDIR/plxd under the
# prefix given then (--prefix, else the build's; DESTDIR before it, added by
# file(INSTALL), which also lists the file in install_manifest.txt), with
# the document root named relative to the file, so that the installed tree
# works where it is installed, staged or moved to. The variables come from
# the install(CODE) before this script in CMakeLists.txt.
foreach(var PLXD_SYSCONFDIR PLXD_DATADIR)
  set(dir "${${var}}")
  if(NOT IS_ABSOLUTE "${dir}")
    set(dir "${CMAKE_INSTALL_PREFIX}/${dir}")
  endif()
  set(${var}_FULL "${dir}")
endforeach()
set(conf_dir "${PLXD_SYSCONFDIR_FULL}/plxd")
file(RELATIVE_PATH root "${conf_dir}" "${PLXD_DATADIR_FULL}/plxd/cgi-bin")
file(READ "${PLXD_CONF_SOURCE}" conf)
string(REPLACE "root = ../cgi-bin" "root = ${root}" conf "${conf}")
if(NOT conf MATCHES "\nroot = ${root}\n")
  message(FATAL_ERROR "${PLXD_CONF_SOURCE} has no line 'root = ../cgi-bin' to point at the installed root")
endif()
file(WRITE "${PLXD_CONF_STAGED}" "${conf}")
file(INSTALL DESTINATION "${conf_dir}" TYPE FILE FILES "${PLXD_CONF_STAGED}")
